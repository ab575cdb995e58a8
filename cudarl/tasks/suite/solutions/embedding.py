"""Solution for the embedding task: out[b, s, :] = weight[indices[b, s], :].

One 256-thread block per looked-up index (grid-stride over the flattened
indices); the block copies the table row with float4 loads/stores when the
embedding dim is a multiple of 4 and the buffers are 16-byte aligned, scalar
copies otherwise. An index outside [0, num_embeddings) (PyTorch would raise)
never reads out of bounds: its output row is filled with NaN instead.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

template <bool VEC>
__global__ void embedding_kernel(const int64_t* __restrict__ idx, const float* __restrict__ weight,
                                 float* __restrict__ out, int64_t n_idx, int64_t num_emb, int64_t dim) {
    for (int64_t r = blockIdx.x; r < n_idx; r += gridDim.x) {
        const int64_t e = idx[r];
        float* o = out + r * dim;
        if (e < 0 || e >= num_emb) {
            for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = NAN;
            continue;
        }
        const float* w = weight + e * dim;
        if (VEC) {
            const float4* w4 = reinterpret_cast<const float4*>(w);
            float4* o4 = reinterpret_cast<float4*>(o);
            const int64_t d4 = dim >> 2;
            for (int64_t j = threadIdx.x; j < d4; j += blockDim.x) o4[j] = w4[j];
        } else {
            for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = w[j];
        }
    }
}

torch::Tensor embedding_cuda(torch::Tensor indices, torch::Tensor weight) {
    TORCH_CHECK(indices.is_cuda() && weight.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(indices.scalar_type() == torch::kInt64, "indices must be int64");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && weight.dim() == 2, "weight must be a float32 matrix");
    const at::cuda::OptionalCUDAGuard guard(device_of(weight));
    indices = indices.contiguous();
    weight = weight.contiguous();
    const int64_t num_emb = weight.size(0), dim = weight.size(1);
    std::vector<int64_t> out_shape(indices.sizes().begin(), indices.sizes().end());
    out_shape.push_back(dim);
    auto out = torch::empty(out_shape, weight.options());
    const int64_t n_idx = indices.numel();
    if (n_idx == 0 || dim == 0) return out;

    const float* pw = weight.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const bool vec = (dim % 4 == 0) && (reinterpret_cast<uintptr_t>(pw) % 16 == 0) &&
                     (reinterpret_cast<uintptr_t>(po) % 16 == 0);
    const int threads = dim >= 1024 ? 256 : 128;
    const int blocks = (int)std::min<int64_t>(n_idx, 1 << 20);
    auto stream = at::cuda::getCurrentCUDAStream();
    if (vec) embedding_kernel<true><<<blocks, threads, 0, stream>>>(indices.data_ptr<int64_t>(), pw, po, n_idx, num_emb, dim);
    else embedding_kernel<false><<<blocks, threads, 0, stream>>>(indices.data_ptr<int64_t>(), pw, po, n_idx, num_emb, dim);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = r"""
torch::Tensor embedding_cuda(torch::Tensor indices, torch::Tensor weight);
"""

embedding_ext = load_inline(
    name="suite_embedding",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["embedding_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return embedding_ext.embedding_cuda(indices, self.embedding.weight.detach())
