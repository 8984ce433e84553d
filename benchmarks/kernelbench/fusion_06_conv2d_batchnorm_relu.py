"""Conv2d (3x3, padding 1), then BatchNorm2d (train-mode statistics), then ReLU."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
height = 128
width = 128
kernel_size = 3
padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, padding):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding]
