"""Generated protobuf and gRPC stubs of package ``tribunal.v1`` (``make protos``; do not edit)."""
