#: expect: full
#: about: nn.Embedding(..., padding_idx=pad_idx) (allowed by the README), masks built with masked_fill-free comparisons, a for loop over positions in greedy_decode
import math

import torch
import torch.nn as nn

from decoder import Decoder
from encoder import Encoder
from positional_encoding import PositionalEncoding


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=512, num_heads=8, num_encoder_layers=6,
                 num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=5000, pad_idx=0):
        super().__init__()
        self.d_model = d_model
        self.pad_idx = pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_idx)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_idx)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)
        self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)
        self.generator = nn.Linear(d_model, tgt_vocab)

    def make_src_mask(self, src):
        return src.eq(self.pad_idx).unsqueeze(-2)

    def make_tgt_mask(self, tgt):
        n = tgt.size(-1)
        pos = torch.arange(n, device=tgt.device)
        return (pos.view(1, n) > pos.view(n, 1)).unsqueeze(0) | tgt.eq(self.pad_idx).unsqueeze(-2)

    def encode(self, src):
        return self.encoder(self.pos_encoding(math.sqrt(self.d_model) * self.src_embed(src)), self.make_src_mask(src))

    def decode(self, tgt, memory, src):
        emb = self.pos_encoding(math.sqrt(self.d_model) * self.tgt_embed(tgt))
        return self.decoder(emb, memory, tgt_mask=self.make_tgt_mask(tgt), memory_mask=self.make_src_mask(src))

    def forward(self, src, tgt):
        memory = self.encode(src)
        return self.generator(self.decode(tgt, memory, src))

    def greedy_decode(self, src, max_len, start_symbol, end_symbol):
        with torch.no_grad():
            memory = self.encode(src)
            out = torch.full((src.shape[0], max_len), self.pad_idx, dtype=torch.long, device=src.device)
            out[:, 0] = start_symbol
            ended = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
            for step in range(1, max_len):
                logits = self.generator(self.decode(out[:, :step], memory, src))
                token = logits[:, -1, :].argmax(-1)
                out[:, step] = torch.where(ended, self.pad_idx, token)
                ended = ended | token.eq(end_symbol)
        return out
