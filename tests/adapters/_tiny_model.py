"""Write a tiny random-weight llama with a locally trained tokenizer (no downloads).

Run with the vLLM environment's interpreter (it has torch, transformers and tokenizers):
``.venv-vllm/bin/python tests/adapters/_tiny_model.py OUT_DIR``. The option letters A-D are
single tokens, so a candidate vector over them can be read from one position.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} : {{ message['content'] }} \n"
    "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}"
)
SENTENCES = [
    "user : which option is right ? A B C D",
    "assistant : the answer is A",
    "assistant : the answer is B",
    "assistant : the answer is C",
    "assistant : the answer is D",
    "system : answer with one letter",
    "the quick brown fox jumps over the lazy dog",
    "what is the capital of france ? paris",
    "hello world , tell me a story about a cat",
]


def build(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(special_tokens=["<unk>", "<s>", "</s>", "<pad>"])
    tok.train_from_iterator(SENTENCES, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=128,
                         intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    option_ids = {label: fast.convert_tokens_to_ids(label) for label in "ABCD"}
    (out / "agentlog_tiny.json").write_text(json.dumps({"option_ids": option_ids}))


if __name__ == "__main__":
    build(Path(sys.argv[1]))
