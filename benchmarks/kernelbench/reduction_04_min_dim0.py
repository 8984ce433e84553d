"""Min over dim=0 of a 2-D tensor."""

import torch
import torch.nn as nn

rows = 4096
cols = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.min(x, dim=0)[0]


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
