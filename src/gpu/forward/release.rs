//! Freeing a model's GPU memory now rather than when the garbage collector gets to it (a
//! browser), whole or all but its weights (a tuner's candidate over weights another model
//! keeps).

use super::{GpuModel, ModelCodeTextures, ModelWeights};

impl GpuModel {
    /// Free the model's GPU memory now (in a browser, dropping a buffer leaves it to the
    /// garbage collector).
    pub fn destroy(self) {
        self.release().destroy();
    }

    /// Free all the model's GPU memory but its weights, which it returns (a tuner's
    /// candidate over weights another model keeps).
    pub fn release(self) -> ModelWeights {
        let a = &self.acts;
        let acts = [
            &a.h,
            &a.h_alt,
            &a.parts,
            &a.qkv,
            &a.scores,
            &a.partials,
            &a.attn,
            &a.ffn,
            &a.logits,
            &a.argmax,
            &a.head_partials,
            &a.none,
            &a.inv_freq,
        ];
        let staging = [
            &self.step,
            &self.draw_params,
            &self.topk_result,
            &self.log_z_result,
            &self.token_staging[0],
            &self.token_staging[1],
            &self.topk_staging,
            &self.logits_staging,
        ];
        let kv = self.kv.k.iter().chain(&self.kv.v);
        for b in acts.into_iter().chain(staging).chain(kv) {
            b.destroy();
        }
        self.prefill.destroy();
        self.verify
            .iter()
            .for_each(super::verify::VerifyBuffers::destroy);
        self.adjust.destroy();
        self.code_textures
            .iter()
            .for_each(ModelCodeTextures::destroy);
        self.weights
    }
}
