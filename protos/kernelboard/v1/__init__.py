"""Generated protobuf and gRPC code of kernelboard.v1 (``make proto``); the .proto files beside it are the source."""
