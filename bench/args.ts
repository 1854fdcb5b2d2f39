/** Removes `name` and the value after it from `args` (a script's argv) and returns the value, if given. */
export function takeFlag(args: string[], name: string): string | undefined {
  const index = args.indexOf(name);
  if (index < 0) return undefined;
  const [value] = args.splice(index, 2).slice(1);
  return value;
}
