"""Worker: 'download' data.csv. The first activation's download is cut short (4 of 6 rows)."""
import os

rows = [(1, 4.0), (2, 8.0), (3, 15.0), (4, 16.0), (5, 23.0), (6, 42.0)]
activation = int(os.environ.get("LOOPPROOF_ACTIVATION", "0"))
arrived = rows[:4] if activation == 0 else rows
with open("data.csv", "w", encoding="utf-8") as out:
    out.write(f"# rows={len(rows)}\nid,value\n")
    out.writelines(f"{i},{v}\n" for i, v in arrived)
print(f"downloaded {len(arrived)} rows")
