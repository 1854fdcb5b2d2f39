/**
 * How `send` learns that a turn it started at once stored its message. Until `stored` settles the run does
 * not exist for anyone else: a failure before then rejects `stored`, and the run leaves no record, event
 * or inbox entry behind (the caller may send the message again).
 */
export interface Acceptance {
  readonly stored: Promise<void>;
  readonly settled: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

export function createAcceptance(): Acceptance {
  let settled = false;
  let resolveStored!: () => void;
  let rejectStored!: (error: unknown) => void;
  const stored = new Promise<void>((resolve, reject) => {
    resolveStored = resolve;
    rejectStored = reject;
  });
  return {
    stored,
    get settled() {
      return settled;
    },
    resolve() {
      settled = true;
      resolveStored();
    },
    reject(error) {
      settled = true;
      rejectStored(error);
    },
  };
}
