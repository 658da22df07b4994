export const port = Number(process.env.PORT ?? 3000);
