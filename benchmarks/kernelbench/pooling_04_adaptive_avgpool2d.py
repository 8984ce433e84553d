"""AdaptiveAvgPool2d to a (1, 1) output (global average pooling)."""

import torch
import torch.nn as nn

batch_size = 32
channels = 256
height = 64
width = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
