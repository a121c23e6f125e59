"""Reading and writing images, y4m streams and videos (ffmpeg), and the options' declarations and messages that the
layers above share (``declare``, ``errors``). Never imports the model."""
