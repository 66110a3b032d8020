// memloop opencode plugin v0
// an older memloop
export const MemloopGate = async () => ({})
