"""ConvTranspose1d with kernel 3 and stride 2."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 64
length = 2048
kernel_size = 3
stride = 2


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
