"""Depthwise Conv2d (groups = channels) with a 3x3 kernel and padding 1."""

import torch
import torch.nn as nn

batch_size = 16
channels = 128
height = 128
width = 128
kernel_size = 3
padding = 1
groups = channels


class Model(nn.Module):
    def __init__(self, channels, kernel_size, padding, groups):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=padding, groups=groups)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size, padding, groups]
