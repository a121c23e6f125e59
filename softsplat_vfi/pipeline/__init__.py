"""Jobs that combine media I/O with the network: video and frame-sequence interpolation."""
