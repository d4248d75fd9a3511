"""A small agent loop: ask the model for the next step, act on it (write it down), repeat, until
the budget refuses the next call. It knows nothing of loopproof: it reads OPENAI_BASE_URL and
OPENAI_API_KEY like any OpenAI client, and the 402 is the API error it gets when a call would
not fit what is left of the attempt's spend ceiling or the run's budget."""

import json

import openai

client = openai.OpenAI(max_retries=0)
notes: list[str] = []
stopped_by = "done"
while len(notes) < 1000:
    try:
        reply = client.chat.completions.create(
            model="stub", max_tokens=32,
            messages=[{"role": "system", "content": "You fix bugs one small step at a time."},
                      {"role": "user", "content": "Steps so far: " + "; ".join(notes[-5:])
                       + ". What next?"}])
    except openai.APIStatusError as exc:
        if exc.status_code != 402:
            raise
        stopped_by = "budget"
        break
    notes.append(reply.choices[0].message.content)
    with open("notes.txt", "a") as f:
        f.write(notes[-1] + "\n")
with open("result.json", "w") as f:
    json.dump({"calls": len(notes), "stopped_by": stopped_by}, f)
