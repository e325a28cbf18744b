"""Horovod's gradient compression: what a tensor travels as."""

import torch


class Compressor:
    """compress(tensor) -> (tensor to send, context);
    decompress(tensor, context) -> tensor as the caller gave it."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    wire = "none"

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class _CastCompressor(Compressor):
    """Floating-point tensors travel as `dtype` and come back as they were;
    other tensors travel unchanged."""

    dtype = None

    @classmethod
    def compress(cls, tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != cls.dtype:
            return tensor.to(cls.dtype), tensor.dtype
        return tensor, None

    @classmethod
    def decompress(cls, tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class FP16Compressor(_CastCompressor):
    dtype = torch.float16
    wire = "fp16"


class BF16Compressor(_CastCompressor):
    dtype = torch.bfloat16
    wire = "bf16"


class Compression:
    """Compression.none, Compression.fp16 and Compression.bf16."""

    none = NoneCompressor
    fp16 = FP16Compressor
    bf16 = BF16Compressor
