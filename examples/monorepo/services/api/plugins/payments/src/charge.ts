export function charge(amountMinor: number): number {
  return amountMinor;
}
