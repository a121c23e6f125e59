"""Reading and writing images, y4m streams and videos (ffmpeg). Never imports the model."""
