"""BatchNorm2d of a 4-D tensor, using batch statistics in train mode."""

import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 96
width = 96


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
