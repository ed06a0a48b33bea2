"""Host and device memory signals, sampled together as one snapshot."""
