"""Generated protobuf modules (``make proto``): the stream protocol and the configuration."""
