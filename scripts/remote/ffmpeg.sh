# Sourced by the remote scripts that run video on a lent GPU machine, which has no ffmpeg. The one requirements.txt's
# imageio-ffmpeg bundles, packed (46 MiB of xz), does not fit one call beside the tree, so it travels in two halves
# over two calls of one lease, the second within the 30 s the machine stays warm; both machines then run one ffmpeg
# and one x264. Made here (2.5 min), into git-ignored .data/ffparts/0 and 1, with the packed file's checksum beside
# the second half (xz's output differs between machines, so the checksum travels with the parts it checks):
#     xz -T2 -9 -c "$(python -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')" >/tmp/ffmpeg.xz
#     split -n 2 -d -a 1 /tmp/ffmpeg.xz /tmp/ffmpeg.xz.part  # then .part0 into .data/ffparts/0/, .part1 into 1/
#     sha256sum /tmp/ffmpeg.xz | cut -d' ' -f1 >.data/ffparts/1/ffmpeg.xz.sha256
# There, the first call: `mkdir -p ~/ffparts && cp .data/ffparts/0/* ~/ffparts/`; the second carries .data/ffparts/1.

use_packed_ffmpeg() {  # puts the packed ffmpeg first on PATH unless one is there; says why when it cannot
    command -v ffmpeg >/dev/null && return 0
    mkdir -p /tmp/ffbin
    local half part
    for half in 0 1; do
        for part in ~/ffparts/ffmpeg.xz.part$half .data/ffparts/$half/ffmpeg.xz.part$half ""; do
            if [ -z "$part" ]; then
                echo "error: ffmpeg.xz.part$half is in neither ~/ffparts nor .data/ffparts/$half" >&2
                return 2
            fi
            if [ -f "$part" ]; then cat "$part"; break; fi
        done
    done >/tmp/ffmpeg.xz
    local sum
    sum=$(cat ~/ffparts/ffmpeg.xz.sha256 .data/ffparts/1/ffmpeg.xz.sha256 2>/dev/null | head -1)
    [ -n "$sum" ] || { echo "error: no ffmpeg.xz.sha256 in ~/ffparts or .data/ffparts/1" >&2; return 2; }
    echo "$sum  /tmp/ffmpeg.xz" | sha256sum -c --quiet || { echo "error: ffmpeg.xz damaged" >&2; return 2; }
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
        /tmp/ffmpeg.xz /tmp/ffbin/ffmpeg
    chmod +x /tmp/ffbin/ffmpeg
    export PATH=/tmp/ffbin:$PATH
}
