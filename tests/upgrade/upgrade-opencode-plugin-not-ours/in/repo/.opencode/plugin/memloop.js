// my own plugin that happens to be called memloop.js
export const X = async () => ({})
