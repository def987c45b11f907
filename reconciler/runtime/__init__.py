"""The running process around the pure core: leases (one writer), and later the loop's stages."""
