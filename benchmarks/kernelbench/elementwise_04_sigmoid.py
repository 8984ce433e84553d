"""Sigmoid activation of a 4-D tensor."""

import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 128
width = 128


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
