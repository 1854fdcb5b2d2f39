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
  return new TurnAcceptance();
}

/**
 * A class, not a literal with a `settled` getter: such a literal, made per turn, kept its getter's closure
 * alive through young-generation collections until a full one (docs/decisions/0026-no-per-call-getter-literals.md).
 */
class TurnAcceptance implements Acceptance {
  readonly stored: Promise<void>;
  settled = false;
  private resolveStored!: () => void;
  private rejectStored!: (error: unknown) => void;

  constructor() {
    this.stored = new Promise<void>((resolve, reject) => {
      this.resolveStored = resolve;
      this.rejectStored = reject;
    });
  }

  resolve(): void {
    this.settled = true;
    this.resolveStored();
  }

  reject(error: unknown): void {
    this.settled = true;
    this.rejectStored(error);
  }
}
