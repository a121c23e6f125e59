# Sourced by the remote scripts that run video on a lent GPU machine, which has no ffmpeg. The one requirements.txt's
# imageio-ffmpeg bundles, packed (46 MiB of xz), does not fit one call beside the tree, so it travels in two halves
# over two calls of one lease, the second within the 30 s the machine stays warm; both machines then run one ffmpeg
# and one x264. Made here (2.5 min), into git-ignored .data/ffparts/0 and 1:
#     xz -T2 -9 -c "$(python -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')" >/tmp/ffmpeg.xz
#     split -n 2 -d -a 1 /tmp/ffmpeg.xz /tmp/ffmpeg.xz.part  # then .part0 into .data/ffparts/0/, .part1 into 1/
# There, the first call: `mkdir -p ~/ffparts && cp .data/ffparts/0/* ~/ffparts/`; the second carries .data/ffparts/1.

# the packed ffmpeg's checksum (n9.0.2, as imageio-ffmpeg 0.8.1 bundles it; xz -T2 -9)
FFMPEG_XZ_SHA256=077ecc1218e041f9d46464d03d1d472332bfb49e5c9b81d4519b0f5e0faaf250

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
    echo "$FFMPEG_XZ_SHA256  /tmp/ffmpeg.xz" | sha256sum -c --quiet || { echo "error: ffmpeg.xz damaged" >&2; return 2; }
    python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
        /tmp/ffmpeg.xz /tmp/ffbin/ffmpeg
    chmod +x /tmp/ffbin/ffmpeg
    export PATH=/tmp/ffbin:$PATH
}
