export { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from "./backoff.ts";
export { ManualClock, systemClock, type Clock } from "./clock.ts";
export {
  JobQueue,
  type EnqueueOptions,
  type Handler,
  type Job,
  type JobStatus,
  type QueueOptions,
} from "./queue.ts";
export { TokenBucket } from "./rateLimiter.ts";
export { Scheduler, type ScheduleEntry } from "./scheduler.ts";
export { Worker, type WorkerOptions } from "./worker.ts";
