"""Reading and writing images (and, later, videos). Never imports the model."""
