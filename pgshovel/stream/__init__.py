"""The stream: protocol codec, publisher framing, validating reader."""
