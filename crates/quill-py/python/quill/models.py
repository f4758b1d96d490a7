"""needle's ``apps/models.py``: ResNet9 for CIFAR-10 and the word-level LanguageModel, written
over ``quill.nn`` (whose layers run in Rust)."""
from . import nn

__all__ = ["ConvBN", "ResNet9", "LanguageModel"]


class ConvBN(nn.Module):
    """``Conv(a, b, k, stride=s)`` ('same' padding) -> ``BatchNorm2d(b)`` -> ``ReLU``."""

    def __init__(self, a, b, k, s, device=None, dtype="float32"):
        super().__init__()
        self.conv = nn.Conv(a, b, k, stride=s, device=device, dtype=dtype)
        self.bn = nn.BatchNorm2d(b, device=device, dtype=dtype)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class ResNet9(nn.Module):
    """needle's ResNet9: (N, 3, 32, 32) images -> (N, 10) logits. ConvBN(3, 16, 7, 4),
    ConvBN(16, 32, 3, 2), a residual pair of ConvBN(32, 32, 3, 1), ConvBN(32, 64, 3, 2),
    ConvBN(64, 128, 3, 2), a residual pair of ConvBN(128, 128, 3, 1), then Flatten,
    Linear(128, 128), ReLU, Linear(128, 10)."""

    def __init__(self, device=None, dtype="float32"):
        super().__init__()
        kw = dict(device=device, dtype=dtype)

        def pair(c):
            return nn.Residual(nn.Sequential(ConvBN(c, c, 3, 1, **kw), ConvBN(c, c, 3, 1, **kw)))

        self.model = nn.Sequential(
            ConvBN(3, 16, 7, 4, **kw),
            ConvBN(16, 32, 3, 2, **kw),
            pair(32),
            ConvBN(32, 64, 3, 2, **kw),
            ConvBN(64, 128, 3, 2, **kw),
            pair(128),
            nn.Flatten(),
            nn.Linear(128, 128, **kw),
            nn.ReLU(),
            nn.Linear(128, 10, **kw),
        )

    def forward(self, x):
        return self.model(x)


class LanguageModel(nn.Module):
    """needle's LanguageModel: ids (seq_len, bs) -> ``Embedding(output_size, embedding_size)``
    -> a sequence model -> ``Linear(hidden, output_size)``. ``seq_model`` is 'rnn', 'lstm',
    'gru' or 'transformer' (needle's defaults: 8 heads of 32, causal; ``seq_len`` bounds its
    positions, and its width is ``embedding_size``)."""

    def __init__(self, embedding_size, output_size, hidden_size, num_layers=1, seq_model="rnn",
                 seq_len=40, device=None, dtype="float32"):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.embedding_size, self.output_size = embedding_size, output_size
        self.num_layers, self.seq_len = num_layers, seq_len
        self.embedding = nn.Embedding(output_size, embedding_size, **kw)
        if seq_model == "rnn":
            self.seq_model = nn.RNN(embedding_size, hidden_size, num_layers, **kw)
        elif seq_model == "lstm":
            self.seq_model = nn.LSTM(embedding_size, hidden_size, num_layers, **kw)
        elif seq_model == "gru":
            self.seq_model = nn.GRU(embedding_size, hidden_size, num_layers, **kw)
        elif seq_model == "transformer":
            self.seq_model = nn.Transformer(embedding_size, hidden_size, num_layers,
                                            sequence_len=seq_len, **kw)
            hidden_size = embedding_size
        else:
            raise ValueError(
                f"seq_model must be 'rnn', 'lstm', 'gru' or 'transformer', got {seq_model!r}"
            )
        self.hidden_size = hidden_size
        self.linear = nn.Linear(hidden_size, output_size, **kw)

    def forward(self, x, h=None):
        """``x`` (seq_len, bs) ids, ``h`` the state from the previous window (or None):
        returns ``(logits (seq_len * bs, output_size), h)``; ``h`` is ``h_n``, ``(h_n, c_n)``
        for LSTM, or zeros for the Transformer."""
        if len(x.shape) != 2:
            raise ValueError(f"LanguageModel: x must be (seq_len, bs) ids, got shape {x.shape}")
        seq_len, bs = x.shape
        out, h = self.seq_model(self.embedding(x), h)
        return self.linear(out.reshape((seq_len * bs, self.hidden_size))), h
