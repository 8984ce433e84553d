"""GroupNorm of a 4-D tensor."""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 128
width = 128
channels_per_group = 8
num_groups = channels // channels_per_group


class Model(nn.Module):
    def __init__(self, num_groups, channels):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
