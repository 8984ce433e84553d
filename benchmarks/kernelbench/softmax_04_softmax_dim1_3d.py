"""Softmax over dim=1 (the channel dim) of a 3-D tensor."""

import torch
import torch.nn as nn

batch_size = 32
channels = 512
length = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
