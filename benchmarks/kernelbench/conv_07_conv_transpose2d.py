"""ConvTranspose2d with a 4x4 kernel, stride 2 and padding 1 (2x upsampling)."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 32
height = 64
width = 64
kernel_size = 4
stride = 2
padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
