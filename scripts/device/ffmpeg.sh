# Sourced by the device scripts (the GPU machine has no ffmpeg): unpacks the carried .data/bin/ffmpeg.xz
# onto PATH and defines make_test_clip. Carry .data/bin and .data/ddp.
mkdir -p /tmp/ffbin
python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.data/bin/ffmpeg.xz'), open('/tmp/ffbin/ffmpeg', 'wb'))"
chmod +x /tmp/ffbin/ffmpeg
export PATH=/tmp/ffbin:$PATH

# make_test_clip WIDTH:HEIGHT FRAMES OUT: the footage clip grounded-sam2__car scaled with lanczos, 25 fps,
# with a 440 Hz AAC track (to check that audio is copied)
make_test_clip() {
    ffmpeg -hide_banner -loglevel error -y -i .data/ddp/grounded-sam2__car.mp4 \
        -f lavfi -i "sine=frequency=440:sample_rate=48000" -vf "scale=$1:flags=lanczos" -frames:v "$2" -r 25 \
        -c:v libx264 -crf 16 -preset fast -c:a aac -shortest "$3"
}
