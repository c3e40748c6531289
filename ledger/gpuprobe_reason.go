package ledger

// ReasonGPUProbe begins the reason of every lease that ended at the GPU
// probe before its run: the leased GPUs did not prove to be what the offer
// said (model, memory, count, or a kernel too slow for the model). Such a
// lease ends failed, attributed to the provider, so nothing of it is owed
// under the default policy. The reason reads "gpu probe failed: " and what
// differed.
const ReasonGPUProbe = "gpu probe failed"
