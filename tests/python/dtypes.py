"""Every dtype kolo moves, for the tests' parametrizations."""

import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64]
