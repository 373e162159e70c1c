// llama.cpp's logits at the last position of each prompt, the accuracy peer of Pagoda's
// integer products (scripts/llamacpp_logits.sh builds and runs it).
//
//   llamacpp_logits MODEL.gguf < PROMPTS     one prompt a line: token ids, space-separated
//
// Prints one line of logits per prompt. Every prompt gets a fresh context with llama.cpp's
// default context settings, the ones its tools run with, on one thread.
#include "llama.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.gguf < PROMPTS\n", argv[0]);
        return 2;
    }
    llama_backend_init();
    llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (model == nullptr) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::string line;
    while (std::getline(std::cin, line)) {
        std::vector<llama_token> ids;
        std::istringstream words(line);
        for (long id; words >> id;) {
            ids.push_back(static_cast<llama_token>(id));
        }
        llama_context_params params = llama_context_default_params();
        params.n_ctx = params.n_batch = params.n_ubatch = 512;
        params.n_threads = params.n_threads_batch = 1;
        llama_context *ctx = llama_init_from_model(model, params);
        if (ctx == nullptr || ids.empty() || ids.size() > 512 ||
            llama_decode(ctx, llama_batch_get_one(ids.data(), static_cast<int>(ids.size()))) != 0) {
            fprintf(stderr, "cannot run a prompt of %zu tokens\n", ids.size());
            return 1;
        }
        const float *logits = llama_get_logits_ith(ctx, -1);
        for (int i = 0; i < vocab; i++) {
            printf(i == 0 ? "%.9g" : " %.9g", logits[i]);
        }
        printf("\n");
        llama_free(ctx);
    }
    llama_model_free(model);
    return 0;
}
