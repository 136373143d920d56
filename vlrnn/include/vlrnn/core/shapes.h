#pragma once
// Shape legend used throughout VLRNN:
//   T = sequence length (time steps)      B = batch size
//   F = input features per step           H = hidden size
//   L = layers                            Z = features the recurrent model emits per step
//   O = outputs per step (head)           C = classes (classification head)
//   K = block length (VLRNN)              Tb = steps in one block (K, or fewer for the last)
// Every sequence tensor is time-major: [T, B, ...].
