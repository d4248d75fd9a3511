from calc import add

assert add(2, 3) == 5, f"add(2, 3) = {add(2, 3)}, want 5"
print("ok")
