//! Hugging Face tensor names to the names llama.cpp's converter gives them.

const LAYER_PARTS: [(&str, &str); 11] = [
    ("self_attn.q_proj", "attn_q"),
    ("self_attn.k_proj", "attn_k"),
    ("self_attn.v_proj", "attn_v"),
    ("self_attn.o_proj", "attn_output"),
    ("self_attn.q_norm", "attn_q_norm"),
    ("self_attn.k_norm", "attn_k_norm"),
    ("mlp.gate_proj", "ffn_gate"),
    ("mlp.up_proj", "ffn_up"),
    ("mlp.down_proj", "ffn_down"),
    ("input_layernorm", "attn_norm"),
    ("post_attention_layernorm", "ffn_norm"),
];

/// `None` for names with no GGUF counterpart.
pub fn gguf_name(hf: &str) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (inner, kind) = rest.rsplit_once('.')?;
    let (_, part) = LAYER_PARTS.iter().find(|(h, _)| *h == inner)?;
    Some(format!("blk.{layer}.{part}.{kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_like_the_converter() {
        assert_eq!(
            gguf_name("model.embed_tokens.weight").unwrap(),
            "token_embd.weight"
        );
        assert_eq!(
            gguf_name("model.layers.11.self_attn.k_proj.bias").unwrap(),
            "blk.11.attn_k.bias"
        );
        assert_eq!(
            gguf_name("model.layers.0.post_attention_layernorm.weight").unwrap(),
            "blk.0.ffn_norm.weight"
        );
        assert_eq!(gguf_name("model.layers.0.mlp.experts.weight"), None);
    }
}
