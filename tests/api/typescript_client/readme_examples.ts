// The README's HTTP examples (Connecting an agent: HTTP, the search body and the endpoint table's
// bodies) written against the types openapi-typescript generates from /api/v1/openapi.json
// (tests/api/test_typescript_client.py writes them to api.d.ts beside this file).
import type { paths } from "./api";

type Body<P extends keyof paths> = paths[P] extends {
  post: { requestBody?: { content: { "application/json": infer B } } };
}
  ? B
  : never;
type Answer<P extends keyof paths> = paths[P] extends {
  post: { responses: { 200: { content: { "application/json": infer A } } } };
}
  ? A
  : never;

const scope = {
  tenant: "teahouse",
  brand: "leaf-and-cup",
  store: "store-002",
  campaign: "campaign-b",
  deployment: "release-1",
};

// README: the curl example's body, as written (no limit: it has a default).
export const search: Body<"/api/v1/knowledge/search"> = {
  query: "小程序优惠券无法使用",
  tenant: "teahouse",
  brand: "leaf-and-cup",
  store: "store-002",
  campaign: "campaign-b",
  occurred_at: "2026-09-18T14:00:00+08:00",
  known_at: "2026-09-18T14:10:00+08:00",
  facts: { channel: "miniapp", product: "fruit-tea", basket_cents: 3200 },
};

// README table: `query`, `scope` (five fields), `run_id`, `now`?, `limit`?
export const retrieve: Body<"/api/v1/experience/retrieve"> = {
  query: "小程序优惠券无法使用",
  scope,
  run_id: "ticket-4711",
};

// README table: `scope`, `occurred_at`, `known_at`, `facts`, `run_id`, `now`?, `inputs`?, `provider`?
export const skillRun: Body<"/api/v1/skills/{skill_id}/run"> = {
  scope,
  occurred_at: "2026-09-18T14:00:00+08:00",
  known_at: "2026-09-18T14:10:00+08:00",
  facts: { channel: "miniapp" },
  run_id: "ticket-4711",
};

// README table: `query`, `scope`, `run_id`, `budget`, `now`?
export const context: Body<"/api/v1/experience/context"> = {
  query: "小程序优惠券无法使用",
  scope,
  run_id: "ticket-4711",
  budget: 400,
};

// README table: `outcome`, `note`?
export const outcome: Body<"/api/v1/runs/{run_id}/outcome"> = { outcome: "resolved_by_lead" };

// README table: investigate a ticket (`provider` defaults to scripted).
export const investigation: Body<"/api/v1/investigations"> = {
  text: "两杯水果茶，优惠券用不了",
  scope,
  occurred_at: "2026-09-18T14:00:00+08:00",
  known_at: "2026-09-18T14:10:00+08:00",
  facts: { channel: "miniapp", product: "fruit-tea", basket_cents: 3200 },
};

// README table: propose a candidate case (import format; `type` defaults to case).
export const proposal: Body<"/api/v1/cases"> = {
  scope,
  incident: "INC-4711",
  title: "Coupon refused for new products",
  valid_from: "2026-09-01T00:00:00+08:00",
  valid_to: "2026-12-31T23:59:59+08:00",
  observations: [{ source_id: "thread:9#m1", excerpt: "Customer: the coupon does not apply." }],
};

// What an agent reads from the answers: every status the README and the tools name.
export function searchStatus(answer: Answer<"/api/v1/knowledge/search">): string {
  switch (answer.status) {
    case "retrieved":
    case "needs_context":
    case "conflicting_sources":
    case "no_match":
      return answer.missing.join(",");
  }
}

export function retrievedIds(answer: Answer<"/api/v1/experience/retrieve">): string[] {
  return answer.status === "ok" ? answer.items.map((item) => item.id) : answer.missing;
}

// The types are a check, not a formality: these bodies are wrong and must not compile.
// @ts-expect-error a search needs its query
export const noQuery: Body<"/api/v1/knowledge/search"> = { tenant: "teahouse" };
// @ts-expect-error limit is a number
export const textLimit: Body<"/api/v1/knowledge/search"> = { query: "x", limit: "5" };
// @ts-expect-error an outcome is one of three words
export const badOutcome: Body<"/api/v1/runs/{run_id}/outcome"> = { outcome: "fixed" };
