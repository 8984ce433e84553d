"""Max over dim=1 of a 2-D tensor."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.max(x, dim=1)[0]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
