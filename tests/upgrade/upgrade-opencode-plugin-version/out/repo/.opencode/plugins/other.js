export const Other = async () => ({})
