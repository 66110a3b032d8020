export const Keep = async () => ({})
