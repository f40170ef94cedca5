import type { JobQueue } from "./queue.ts";
import type { TokenBucket } from "./rateLimiter.ts";

export interface WorkerOptions {
  /** How long to sleep when no job is due. Default 50 ms. */
  pollMs?: number;
  /** Optional limit on how fast jobs are started. */
  limiter?: TokenBucket;
}

/** Pulls due jobs from a queue one at a time until stopped. */
export class Worker {
  private readonly queue: JobQueue;
  private readonly pollMs: number;
  private readonly limiter?: TokenBucket;
  private running = false;
  private loop?: Promise<void>;

  constructor(queue: JobQueue, opts: WorkerOptions = {}) {
    this.queue = queue;
    this.pollMs = opts.pollMs ?? 50;
    this.limiter = opts.limiter;
  }

  get isRunning(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stop polling; resolves once the job in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async run(): Promise<void> {
    const clock = this.queue.clock;
    while (this.running) {
      if (this.queue.due().length === 0) {
        await clock.sleep(this.pollMs);
        continue;
      }
      if (this.limiter) {
        const wait = this.limiter.msUntilAvailable();
        if (wait > 0) {
          await clock.sleep(wait);
          continue;
        }
        this.limiter.tryAcquire();
      }
      await this.queue.runNext();
    }
  }
}
