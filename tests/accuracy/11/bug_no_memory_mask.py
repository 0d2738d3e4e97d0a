#: expect: loses
#: fails: [11-padding]
#: hint: [mask-not-passed]
#: about: decode passes no memory mask: the cross-attention attends to padded sources
import torch
from torch import nn

from decoder import Decoder
from encoder import Encoder
from positional_encoding import PositionalEncoding


def source_mask(src, pad_idx):
    return (src == pad_idx)[:, None, :]


def target_mask(tgt, pad_idx):
    n = tgt.shape[1]
    future = torch.ones(n, n, dtype=torch.bool, device=tgt.device).triu(diagonal=1)
    return future[None] | (tgt == pad_idx)[:, None, :]


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, pad_idx=0):
        super().__init__()
        self.d_model, self.pad_idx = d_model, pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def encode(self, src):
        x = self.pos_encoding(self.src_embed(src) * self.d_model ** 0.5)
        return self.encoder(x, source_mask(src, self.pad_idx))

    def decode(self, tgt, memory, src):
        y = self.pos_encoding(self.tgt_embed(tgt) * self.d_model ** 0.5)
        return self.decoder(y, memory, target_mask(tgt, self.pad_idx))

    def forward(self, src, tgt):
        return self.generator(self.decode(tgt, self.encode(src), src))

    @torch.no_grad()
    def greedy_decode(self, src, max_len, start_symbol, end_symbol):
        memory = self.encode(src)
        ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        while ys.size(1) < max_len:
            if done.all():
                pad = torch.full((src.size(0), max_len - ys.size(1)), self.pad_idx, dtype=torch.long, device=src.device)
                ys = torch.cat([ys, pad], dim=1)
                break
            next_word = self.generator(self.decode(ys, memory, src)[:, -1]).argmax(dim=-1)
            next_word = torch.where(done, torch.full_like(next_word, self.pad_idx), next_word)
            done = done | (next_word == end_symbol)
            ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        return ys
