# Sourced by the device scripts (the GPU machine has no ffmpeg): unpacks ffmpeg onto PATH and defines
# make_test_clip. Carry .data/ddp, and either .data/bin (ffmpeg.xz, 48 MiB) or, where that does not fit beside the
# tree and other data, its halves staged over two calls of one lease (.data/ffmpeg-parts/0 and 1, from
# `split -n 2 -d -a 1 .data/bin/ffmpeg.xz ffmpeg.xz.part`), each copied by its call into ~/ffparts:
#     mkdir -p ~/ffparts && cp .data/ffmpeg-parts/N/* ~/ffparts/
# ffmpeg.xz is the program that requirements.txt's imageio-ffmpeg bundles, packed on the CPU machine (2 min):
#     mkdir -p .data/bin && xz -9 -c "$(python -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')" >.data/bin/ffmpeg.xz
mkdir -p /tmp/ffbin
if [ -f .data/bin/ffmpeg.xz ]; then
    packed=.data/bin/ffmpeg.xz
else
    cat ~/ffparts/ffmpeg.xz.part* >/tmp/ffmpeg.xz
    packed=/tmp/ffmpeg.xz
fi
python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open('/tmp/ffbin/ffmpeg', 'wb'))" "$packed"
chmod +x /tmp/ffbin/ffmpeg
export PATH=/tmp/ffbin:$PATH

# make_test_clip WIDTH:HEIGHT FRAMES OUT: the footage clip grounded-sam2__car scaled with lanczos, 25 fps, 4:2:0
# chroma as most cameras and sites deliver (the clip itself is 4:4:4), with a 440 Hz AAC track (to check that
# audio is copied)
make_test_clip() {
    ffmpeg -hide_banner -loglevel error -y -i .data/ddp/grounded-sam2__car.mp4 \
        -f lavfi -i "sine=frequency=440:sample_rate=48000" -vf "scale=$1:flags=lanczos" -frames:v "$2" -r 25 \
        -pix_fmt yuv420p -c:v libx264 -crf 16 -preset fast -c:a aac -shortest "$3"
}
