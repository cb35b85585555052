"""Adapter: ingest's Push RPC, called with the scheduler's own identity (system:scheduler) for refs/jobs/<id>."""

import grpc
from kernelboard.v1 import ingest_pb2, ingest_pb2_grpc

from services.scheduler.jobdir import ResultRejected

# Ingest's answers about the result itself: pushing the same bundle again would get the same answer.
_FINAL = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION}


class IngestPusher:
    def __init__(self, address: str, token: str, *, timeout_s: float = 120.0):
        self.address = address
        self.token = token
        self.timeout_s = timeout_s

    async def push(self, ref: str, bundle: bytes) -> str:
        async with grpc.aio.insecure_channel(
            self.address, options=[("grpc.max_send_message_length", 512 << 20)]
        ) as channel:
            try:
                reply = await ingest_pb2_grpc.IngestStub(channel).Push(
                    ingest_pb2.PushRequest(ref=ref, bundle=bundle),
                    metadata=(("authorization", f"Bearer {self.token}"),),
                    timeout=self.timeout_s,
                )
            except grpc.aio.AioRpcError as err:
                if err.code() in _FINAL:
                    raise ResultRejected(
                        f"ingest refused the result: {err.code().name}: {err.details()}; nothing committed"
                    ) from None
                raise RuntimeError(f"ingest Push {ref} at {self.address}: {err.code().name}: {err.details()}") from None
        return reply.sha
